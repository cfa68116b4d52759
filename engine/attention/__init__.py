"""The attention list: what needs a person, from facts the engine already has.

- :mod:`engine.attention.model`    the item (key, kind, subject, since, why, action) and its kinds
- :mod:`engine.attention.board`    blocked cards, cards the breaker blocked, review, stale claims, lost hosts
- :mod:`engine.attention.boards`   every board of the home, each read again only when its files changed
- :mod:`engine.attention.sources`  sessions, watches, scratch, the prune log, the disk, doctor, the app's ticks
- :mod:`engine.attention.collect`  reading the sources and computing the items
- :mod:`engine.attention.state`    dismissals and notice claims (``<home>/hermes-tui/``; a guest home's outside it)
- :mod:`engine.attention.notify`   the bell, OSC 9/777, notify-send, ``notify.command``

Kept small on import: ``engine.config`` checks ``notify.kinds`` against the model.
"""
