"""Peers: a connection that real daemons closed for being unused
(peer_idle) comes back by resuming the earlier session, with no MUNGE
credential made or checked; a node restarted in between holds no ticket,
and the reconnect falls back to a full handshake on the same connection.

The daemons are test_peers.py's (one pfs-sim, a private munged, TCP on
loopback). A node connects to another on first need: reading half of the
files through n0 makes n0 ask n1 for the chunks n1 keeps; peer_idle=1
closes that connection a second later; reading the other half makes it
again."""
import unittest

import harness
import test_peers

IDLE = ("peer_idle=1",)


def setUpModule():
    test_peers.setUpModule()


def tearDownModule():
    test_peers.tearDownModule()


def remote(job, i, name):
    """Node i's figures for its connection to `name`."""
    return next(r for r in job.peers(i)["remote"] if r["name"] == name)


def connect_and_close(job, names):
    """n0 reads `names` (so connects to n1), then its unused connection to
    n1 is closed (peer_idle). Returns how many times it came up so far."""
    ups = remote(job, 0, "n1")["ups"]
    job.read_all(0, names)
    harness.wait_for(lambda: remote(job, 0, "n1")["ups"] > ups, timeout=10,
                     what="n0 connected to n1")
    closed = remote(job, 0, "n1")["closed_idle"]
    harness.wait_for(lambda: remote(job, 0, "n1")["closed_idle"] > closed, timeout=15,
                     what="n0's connection to n1 closed unused")
    return remote(job, 0, "n1")["ups"]


def started(job):
    """Both nodes mounted with peer_idle=1; the files in two halves."""
    for i in (0, 1):
        job.start(i, extra=IDLE)
    job.wait_ready()
    names = sorted(job.data)
    return names[0::2], names[1::2]


class ResumptionTest(unittest.TestCase):
    def test_a_connection_closed_unused_comes_back_without_munge(self):
        with test_peers.Job(2) as job:
            first, second = started(job)
            connect_and_close(job, first)
            server = job.peers(1)["server"]
            self.assertEqual(server["authenticated"], 1, server)
            ups = connect_and_close(job, second)
            self.assertEqual(ups, 2)
            server = job.peers(1)["server"]
            # The second connection checked no MUNGE credential: n1's door
            # made one full handshake in all, and resumed the session once.
            self.assertEqual(server["authenticated"], 1, server)
            self.assertEqual(server["resumed"], 1, server)
            self.assertEqual(sum(server["resume_refused"].values()), 0, server)
            r = remote(job, 0, "n1")
            self.assertEqual(r["resumed"], 1, r)
            self.assertEqual(r["downs"], 0, r)
            self.assertGreater(r["fetched_chunks"] + r["not_resident"] + r["offered"], 0, r)
            # Reads stay bit-exact through both nodes.
            job.read_all(1)

    def test_a_restarted_node_refuses_the_ticket_and_a_full_handshake_follows(self):
        with test_peers.Job(2) as job:
            first, second = started(job)
            connect_and_close(job, first)
            old = job.mounts[1]
            self.assertEqual(old.close(), 0)
            old.log.close()
            job.start(1, extra=IDLE)
            job.wait_ready()
            connect_and_close(job, second)
            server = job.peers(1)["server"]
            self.assertEqual(server["resume_refused"]["unknown"], 1, server)
            self.assertEqual(server["authenticated"], 1, server)
            self.assertEqual(server["resumed"], 0, server)
            r = remote(job, 0, "n1")
            self.assertEqual(r["resume_refused"], 1, r)
            self.assertEqual(r["resumed"], 0, r)
            self.assertEqual(r["refused"], 0, r)
            self.assertEqual(r["ups"], 2, r)


if __name__ == "__main__":
    harness.main()
