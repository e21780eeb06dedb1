"""The main job and what it writes: levels and suites (``levels``, ``suite``,
``grid``), the run of each configuration in a fresh process (``runner``,
``turns``, ``operators``), the results folder (``store``, ``resumable``,
``folder``), confirmation rounds (``confirm``), shards and merge
(``shards``, ``merge``), the job itself (``job``) and its console (``ui``).

Each module is imported by its own name (``pyparbench.harness.job``): this
package re-exports nothing, so that importing one part (a child process's
``runner``) does not import the others.
"""
