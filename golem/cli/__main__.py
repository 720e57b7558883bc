"""``python -m golem.cli``: the ``golem`` command."""

from golem.cli.entry import main

main()
