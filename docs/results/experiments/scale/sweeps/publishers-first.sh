#!/bin/bash
# The clients sweep with publishers opened before the settle check (bench,
# 1da2768) and the longer series (f3c9f87): 50 per site at the base's
# delivery volume, then 50 and 20 per site and the base at the sweep's own
# --scale 0.005 (volume.sh's runs), under the lab lock.
#   flock -o /work/lab.lock docs/results/experiments/scale/sweeps/publishers-first.sh
TAG=pubfirst exec "$(dirname "$0")/volume.sh" scale-clients-50:0.001 scale-clients-50:0.005 \
  scale-clients-20:0.005 scale-base:0.005
