# Sourced by the other scripts: the environment that autoloco's runs and tests expect.
# Open MPI refuses root and more ranks than cores unless told; containers and laptops need both.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# (GNU nproc honours OMP_NUM_THREADS: scripts count cores with getconf instead.)
# With several ranks per host, one OpenMP thread each before a run sets its own (autoloco sets
# torch's intra-op threads, which MKL shares, from run.threads).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# Debian 12 on Python: /usr/bin/python3 has the Debian packages that setup.sh installs.
AUTOLOCO_PYTHON=${AUTOLOCO_PYTHON:-/usr/bin/python3}
