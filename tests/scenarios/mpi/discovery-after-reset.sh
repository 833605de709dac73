#!/bin/sh
# discovery-after-reset.sh: a host discovery script as Horovod's --host-discovery-script runs it
# ("host:slots" lines), for tests/scenarios/mpi/elastic-grow-crash.yaml on one machine: nodes 0 to 2
# from the start (node 1 listed all along, dead or not), and the spare node 3 once the driver has
# formed world 1, the world after the crash (its w1.world file), as a spare brought in after a
# failure.  Tied to the driver's files, not to the clock, so the crash always comes first.
dir="${RH_ELASTIC_DIR:?run by rehearsal elastic}"
echo node0:1
echo node1:1
echo node2:1
if [ -f "$dir/w1.world" ]; then echo node3:1; fi
