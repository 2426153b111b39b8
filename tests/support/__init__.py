"""Helpers for the tests (tests/ is on sys.path: ``from support.paths import REAL``).

paths     where the shared material lives (../shared beside the checkout), file lists, manifests
cli       the mosqdb CLI in a child process (as a user runs it) and in this process
clock     fixed reference times: the fixtures age, no test may depend on today's date
records   decode a file into comparable records, hashes, check errors
brokers   a real Mosquitto broker on a free port, MQTT clients that collect what it serves
services  MariaDB and Redis fixtures (free ports, temp dirs)
forward   forward-packet doc examples, stream files, a fwd-listen process, scripted receivers
migrate   what a migration must produce (plain decode oracle)
tui       driving the Textual app in tests
"""
