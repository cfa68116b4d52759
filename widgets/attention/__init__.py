"""The attention screen: what needs the user, across panes."""
