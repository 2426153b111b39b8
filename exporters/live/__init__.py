"""Live brokers: replay a db into any MQTT broker, and clear or restore retained messages on a running one.

``url`` (the ``mqtt://`` / ``mqtts://`` target), ``messages`` (a stored message as a PUBLISH and back),
``connection`` (one paho-mqtt client: connect, publish window, barriers, one error line),
``fanout`` (which recreated sessions a publish reaches), ``plan`` (what a replay will send),
``resume`` (the state file of an interrupted run), ``replay`` (the run), ``retained``
(collect, clear, verify, restore) and ``backup`` (a real mosquitto.db or JSON Lines of what was cleared).
"""
