"""The Slurm backend (SageMaker HyperPod with Slurm, or any Slurm cluster): see `backend.py`."""
