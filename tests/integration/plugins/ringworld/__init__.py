"""ringworld: a tiny out-of-tree conceptlab plug-in (a data kind with its study, and an intervention).

Nothing in conceptlab knows this package: configs name it by import path (`data.kind: ringworld.world:RingStudy`,
`eval.interventions.custom: [{path: ringworld.edits:Exaggerate}]`). docs/extending.md walks through it.
"""
