"""This machine: what it is (``info``), what it can do (``peak``: measured
ceilings, the roofline), what else runs on it now (``cpuload``), and the
fingerprint a result carries (``fingerprint``: one function, one list of the
fields that identify a machine, and the two questions asked of two
fingerprints)."""
