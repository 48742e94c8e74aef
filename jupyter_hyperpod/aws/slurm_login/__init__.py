"""A Studio space (or any machine) made a login node of a HyperPod Slurm cluster, as the seed's
lifecycle script does (awsome-distributed-training `slurm-studio/slurm_lifecycle.sh`): the
controllers found through the SageMaker API, `slurm.conf` written, the munge key fetched over SSM,
munge and slurm ids aligned with the controller's, munged started, `sinfo` checked.

Small modules, each with its collaborators passed in: `controllers` (SageMaker), `slurmconf`
(the file), `ssm` (the key over a Session Manager session), `node` (this machine: users, key,
munged, checks), `setup` (the steps, each failure naming its step and its fix), `lifecycle` (the
Studio lifecycle configuration that runs the same at space start).
"""
