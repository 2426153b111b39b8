"""What the command modules share and no user calls by name: write options, backups and ``--at`` (writing),
the progress bar and ``-q`` (progress), ``--conf`` and ``--broker`` (bridging, broker), ``--decode``
(decoding), session selection and removals (removal), the sqlite store's write commands (store),
the forward-packet sinks of ``export`` (forward_export).

Kept below ``inspector/commands/`` so that folder lists the verbs alone: every module there is a command.
"""
