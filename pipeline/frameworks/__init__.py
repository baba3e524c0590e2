"""Where evaluations and RL training happen: the episode core served to Inspect and verifiers.

Both adapters drive the one episode core (``pipeline.harness.core.Session``): the same
sandbox, ledger, budget, turn accounting, exit rules, transcript and scorer as every
episode of ``pipeline.episode``, the MCP server and the chat adapters.  Nothing here is a
turn loop of its own: a framework's model calls tools, each call is ``Session.call``, a
text reply is ``Session.respond``, and the score is ``Session.finish()``.

``inspect_task``
    the Inspect task ``drugtargetworld/episode``, its solvers, tools and scorer
    (``pip install 'drugtargetworld[inspect]'``); defined in ``drugtargetworld.inspect_task``,
    the module of the ``inspect_ai`` entry point, because Inspect names a package's tasks
    after the top-level import package that defines them.
``rl``
    ``load_environment`` (also ``pipeline.rl.load_environment``): a verifiers multi-turn
    tool environment over training worlds generated from a named seed namespace
    (``pip install 'drugtargetworld[rl]'``).
``worlds``
    world specifications: training seeds (a keyed hash of namespace and index, refused when
    equal to any evaluation seed), the curriculum's world families, building and reusing
    worlds by config digest, and an evaluation panel's worlds.
``common``
    what both share: parameter checks with one-line errors, the score as metrics, and the
    bookkeeping a framework's own tool dispatch needs.
"""
