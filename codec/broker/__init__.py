"""What a Mosquitto broker does around its db: its configuration (and, later, its loader's rules)."""
