"""Kubernetes backend: HyperPod EKS / Kubeflow PyTorchJob and HyperPodPyTorchJob."""
