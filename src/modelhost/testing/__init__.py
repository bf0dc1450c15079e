"""Test helpers for modelhost.

`modelhost.testing.tinymodels` builds tiny random models (a Llama, its GGUF twin, an Idefics3 vision-language model
and a Llama with a thought channel) offline, in well under a second each, so that tests and benchmarks never need a
model hub. `modelhost.testing.standins` has `ScriptedModel`, a stand-in TextModel that plays a script at a pace the
test controls, for tests of the scheduler's and the doors' own logic.
"""
