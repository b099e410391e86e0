#!/bin/bash
# One locked session: scale-clients-50 on drip with this branch's binaries
# (f5d5dc3: control messages decoded on the link readers, advertisements
# taken as sent, and the bench's publishers closing together at the end of
# sending), then main's (6e2841b) right after, then scale-clients-20 on this
# branch's. Binaries are copies in /work/ctl-runs/{new,old}; the runs'
# working files go to /work/ctl-out.
D=/work/wt/docs/results/experiments/scale
O=/work/ctl-out
date -u +"lock taken %FT%TZ"
R=/work/ctl-runs/new NAME=ctl $D/run4/run.sh $O/clients50-new scale-clients-50 drip
R=/work/ctl-runs/old NAME=ctl $D/run4/run.sh $O/clients50-old scale-clients-50 drip
R=/work/ctl-runs/new NAME=ctl $D/run4/run.sh $O/clients20-new scale-clients-20 drip
date -u +"lock released %FT%TZ"
