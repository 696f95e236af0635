"""The release's selection, on the floor below stages 6 and 7 and the release: its rules (``release_selection``), the
adversarial filter with its shortcut audit (``adversarial``, ``shortcut_audit``), and the demand plans that stages 6
and 7 derive from them (``demand``), so that they score and rewrite only what the release will use."""
