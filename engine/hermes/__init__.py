"""Readers of hermes-agent's own files in a shared home.

hermes-tui's default home is ``~/.hermes``, hermes-agent's home. These modules only
*read* what hermes writes (its config keys, its ``processes.json`` checkpoint, the
files that show a home is hermes's) so hermes-tui can share the home without harming
it. Nothing here writes to a hermes file.
"""
