"""Readers of the files a benchmark leaves: ETDump traces, ETRecords, tensor files and the
.pte flatbuffer. No torch."""
