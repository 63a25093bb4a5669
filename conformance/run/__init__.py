"""How checks run and what is kept: checks, batches, the runner and Ray, fuzz, child processes, progress, the journal and out folder, the example database, provenance."""
