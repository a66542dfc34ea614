"""Review rounds: people judging what a machine wrote or judged (docs/review.md; DESIGN §9).

A **round** is data: its items (:mod:`.items`: what is judged, the content hash of what is judged and what a
reviewer needs to judge it), their assignment to reviewers (:mod:`.rounds`: each item to at least two) and, once
answered, the **decisions** (:mod:`.decisions`: reviewer, item, hash, the answers to the item's questions, and
accept | fix + text | reject + reason). Agreement per round and question is :mod:`.agreement`; what a build does
with decisions (fixes, rejects, stale decisions) is :mod:`.apply`. A round travels as a spreadsheet-safe CSV
(:mod:`.sheets`) or as a Label Studio project (:mod:`.label_studio`); both give the same decisions table.
"""
