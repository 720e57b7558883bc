"""``python -m golem.cli``: the ``golem`` command."""

from golem.cli.app import main

main()
