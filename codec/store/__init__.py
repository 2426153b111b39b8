"""Mosquitto 2.1's persist-sqlite store (``mosquitto.sqlite3``) as a first-class file.

``schema``: the plugin's tables, declared once, and how each row maps onto the v6 chunk values
the rest of mosqdb speaks; ``read``: a store opened for reading (its figures, and its rows as the
column batches of :mod:`codec.columnar`); ``check``: its integrity rules; ``lock``: is a broker
using it; ``edit``: in-place edits in one transaction; ``todb``: a store written as a v6 .db;
``report``: the migration report every target shares.
"""
