"""AWS discovery with boto3 (imported lazily): HyperPod clusters, EKS kubeconfig, FSx, Studio."""
