"""Small helpers with no vlbench knowledge: atomic writes, strict JSON, bounded reads, hashing and the folder
lock (:mod:`.io`), library versions (:mod:`.env`), Markdown tables (:mod:`.markdown`) and default folders
(:mod:`.paths`). A helper belongs here when two parts need it and it names nothing of vlbench's. This
file holds no logic.
"""
