"""hermes-tui: the console for an agent workspace (the application layer).

Importing this package must stay cheap: the CLI imports it for ``--help`` and
``doctor``, which must not pull in Textual.
"""

__version__ = "0.1.0"
