"""``vlbench reproduce hendriksen2024``: the runs behind the chapter's Tables 5.2-5.4 (:mod:`.run`), the checks
of everything they need (:mod:`.plan`), the command line (:mod:`.cli`) and the published values (``data/``)."""
