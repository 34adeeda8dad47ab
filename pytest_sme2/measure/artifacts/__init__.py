"""What one block leaves beside its ETDump, written as it is measured: the seed kit's CSV files
(:mod:`.csv`) and a Chrome/Perfetto trace of its median run (:mod:`.trace`). The report renders
whole sessions (:mod:`pytest_sme2.report`); these are per block, below the benchmark loop."""
