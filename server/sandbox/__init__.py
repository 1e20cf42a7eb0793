"""The sandbox a job runs in: the launch (bubblewrap, rlimits), cgroups, seccomp, scratch
directories."""
