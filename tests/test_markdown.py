"""The one Markdown table renderer (Table 2, the dataset card, the evaluation's tables)."""

import math

import numpy as np

from pbbq.tasks.core.markdown import cell, markdown_table


def test_cells_format_floats_and_escape_text() -> None:
    assert cell(0.123456) == "0.1235" and cell(np.float64(2)) == "2.0000"
    assert cell(math.nan) == "not computed"
    assert cell(3) == "3" and cell(np.int64(7)) == "7"  # integers are counts, not measures
    assert cell("a|b\nc") == "a\\|b c"
    assert cell("0.2500 [0.1000, 0.3000]") == "0.2500 [0.1000, 0.3000]"  # formatted text passes unchanged


def test_a_table_with_bold_rows_and_left_alignment() -> None:
    rows = [["Age", 2, 0.5], ["Total", 3, math.nan]]
    assert markdown_table(["Category", "n", "x"], rows, bold=("Total",)) == (
        "| Category | n | x |\n| --- | --- | --- |\n| Age | 2 | 0.5000 |\n| **Total** | **3** | **not computed** |"
    )


def test_the_bold_label_may_be_another_column_and_numbers_right_aligned() -> None:
    rows = [("fa", "Average", 1), ("Average", "Age", 2)]
    text = markdown_table(["Config", "Category", "n"], rows, bold=("Average",), label=1, right_from=1)
    assert text.splitlines() == [
        "| Config | Category | n |",
        "| --- | ---: | ---: |",
        "| **fa** | **Average** | **1** |",
        "| Average | Age | 2 |",
    ]
    assert markdown_table(["A"], []) == "| A |\n| --- |"
