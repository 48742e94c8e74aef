"""Cluster-admin tools: per-user partitions on the shared file system."""
