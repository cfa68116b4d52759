"""Switching panes does only what the switch changes (issue 22), through the real app
(Pilot): the two panes whose active mark changes are restyled alone (not every widget
inside them), the narrow layout still shows the active pane, and the keys footer
changes its keys in place to exactly the keys a full rebuild would show."""

from __future__ import annotations

from engine.config import load_config
from hermes_tui.app import HermesApp
from tests.support import wait_until_pilot as wait_for
from tests.support.drawing import count_layouts
from widgets.common.keys_footer import KeysFooter
from widgets.common.pane import Pane


def shown_bindings(app: HermesApp) -> list[tuple]:
    """The keys Textual's Footer would show now: the first shown binding of each action,
    in order, as (key shown, description, enabled)."""
    seen, keys = set(), []
    for _node, binding, enabled, _tooltip in app.screen.active_bindings.values():
        if binding.show and binding.action not in seen:
            seen.add(binding.action)
            keys.append((app.get_key_display(binding), binding.description, enabled))
    return keys


async def test_a_switch_restyles_the_two_panes_alone_and_narrow_shows_the_active_one(home):
    """The -active class was set through the stylesheet's update of each pane's whole
    subtree: every widget of both panes restyled, most of a switch's time."""
    app = HermesApp(home, load_config(home.config_file))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        restyled = []
        update_styles = app.update_styles
        app.update_styles = lambda node=None, *a, **k: (restyled.append(node), update_styles(node, *a, **k))[1]
        await pilot.press("2")
        await wait_for(pilot, lambda: app.active_pane.id == "processes", what="the processes pane active")
        await pilot.pause()
        assert not [n for n in restyled if isinstance(n, Pane)]
        panes = {p.id: p for p in app.query(Pane)}
        assert panes["processes"].has_class("-active") and not panes["board"].has_class("-active")
        assert panes["processes"].styles.border_top != panes["board"].styles.border_top  # the accent border moved
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: app.narrow, what="the narrow layout")
        for key, pane_id in (("3", "scratch"), ("1", "board"), ("2", "processes")):
            await pilot.press(key)
            await wait_for(pilot, lambda pane_id=pane_id: [p.id for p in app.query(Pane) if p.display
                                                           and p.region.area > 0] == [pane_id],
                           what=f"only {pane_id} shown")


async def test_a_switch_is_drawn_without_a_layout_and_the_footer_shows_the_new_keys(home, monkeypatch):
    """The footer was a widget per key: each switch mounted or resized some, and each of
    those was a layout of the whole screen and one more frame after the panes had changed
    (the last 50-70 ms after the key). A switch now lays nothing out; the footer's one
    line shows the keys of the pane switched to."""
    app = HermesApp(home, load_config(home.config_file))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        footer = app.query_one(KeysFooter)
        await wait_for(pilot, lambda: footer.entries, what="the footer's keys")
        layouts = count_layouts(monkeypatch)
        for key in ("2", "3", "4", "1"):
            described = {b.description for _n, b, _e, _t in app.screen.active_bindings.values()}
            layouts.clear()
            await pilot.press(key)
            await wait_for(pilot, lambda described=described: {
                b.description for _n, b, _e, _t in app.screen.active_bindings.values()} != described,
                what=f"the bindings of pane {key}")
            await pilot.pause()
            assert layouts == [], key
            footer.render()  # what the footer draws now
            keys = [(e.key_display, e.description, not e.disabled) for e in footer.entries if not e.palette]
            assert keys == shown_bindings(app)[:len(keys)] and len(keys) >= 5, key
            line = footer.render().plain
            assert all(f"{k} {d}" in line for k, d, _e in keys)


async def test_a_switch_repaints_neither_the_whole_screen_nor_what_is_inside_the_two_panes(home):
    """Two costs of every switch, each most of its time: Textual's Screen repainted the
    whole terminal on any focus change, and the active title's colour rule
    (``border-title-color``) made Textual refresh every widget inside both panes. Only the
    two panes' own frames and the widgets gaining and losing focus are refreshed now."""
    from textual._compositor import Compositor
    from textual.widget import Widget

    app = HermesApp(home, load_config(home.config_file))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        full, refreshed = [], []
        render_update, refresh = Compositor.render_update, Widget.refresh

        def watched_update(compositor, full_=False, *a, **k):
            full.append(full_ or compositor.size.region in compositor._dirty_regions)
            return render_update(compositor, full_, *a, **k)

        def watched_refresh(widget, *a, **k):
            refreshed.append(widget)
            return refresh(widget, *a, **k)

        Compositor.render_update, Widget.refresh = watched_update, watched_refresh
        try:
            before = app.focused
            await pilot.press("3")
            await wait_for(pilot, lambda: app.active_pane.id == "scratch", what="the scratch pane active")
            await pilot.pause()
        finally:
            Compositor.render_update, Widget.refresh = render_update, refresh
        panes = {p.id: p for p in app.query(Pane)}
        assert full and not any(full)  # frames were drawn, none of the whole screen
        moved = {before, app.focused}
        inside = [w for w in refreshed if w not in moved and any(p in w.ancestors for p in
                                                                 (panes["board"], panes["scratch"]))]
        assert inside == []
        assert panes["scratch"] in refreshed and panes["board"] in refreshed  # their frames change
