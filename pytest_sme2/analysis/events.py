"""The events frame's ``name`` column as numpy arrays, for the analysis's vectorised passes.

:func:`pytest_sme2.readers.etdump.read_etdump` makes ``name`` categorical: a few hundred distinct
names repeat in every run. Comparing and classifying through its integer codes costs one pass over
small arrays instead of one string comparison per event; any other column type is factorized.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # only annotations: results.json readers need no pandas
    import pandas as pd


def name_codes(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(code of each row, distinct names as an object array): ``uniques[codes[i]]`` is row
    i's name. A missing name is a distinct value of its own (NaN), as ``pd.factorize`` with
    ``use_na_sentinel=False`` gives it."""
    import pandas as pd  # pandas: only name_codes() needs it

    if isinstance(names.dtype, pd.CategoricalDtype):
        codes = names.array.codes
        if not (codes < 0).any():
            return codes, names.array.categories.to_numpy(dtype=object)
    codes, uniques = pd.factorize(names, use_na_sentinel=False)
    return codes, np.asarray(uniques, dtype=object)


def name_is(names: pd.Series, *wanted: str) -> np.ndarray:
    """Boolean mask of the rows whose name is one of ``wanted``."""
    codes, uniques = name_codes(names)
    hits = [i for i, name in enumerate(uniques.tolist()) if name in wanted]
    if not hits:
        return np.zeros(len(codes), dtype=bool)
    if len(hits) == 1:
        return codes == hits[0]
    return np.isin(codes, hits)
