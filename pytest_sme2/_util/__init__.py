"""Small utilities with no project imports: versions, file locks, the build cache, atomic
file writes, the runner protocol's defaults."""
