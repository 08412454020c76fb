"""``looprun validate``'s work: which files, the full check, GitHub annotations, and the
pass over them all with the cache of files found valid."""
