"""Unit tests of scripts/bench_ab.py's row parsing, run order and medians (the standard
library only; no benchmark runs).

    python3 -m unittest scripts/test_bench_ab.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_ab as ab  # noqa: E402

LIBM = """f32 function, 2^24 elements              fn ms     base ms  fn/base
libm f32 pow / exp                      10.366       5.029     2.06
libm f32 tanh / exp                      5.100       4.000     1.27
sound launches (CPU)                     default ms  unchecked ms   ratio
vector add                                   3.000        2.900    0.967
  softmax view          1.250 ms       1.01x
"""


class ParseRows(unittest.TestCase):
    def test_rows_are_lines_ending_in_numbers(self):
        rows = ab.parse_rows(LIBM)
        self.assertEqual(rows["libm f32 pow / exp"], [10.366, 5.029, 2.06])
        self.assertEqual(rows["vector add"], [3.0, 2.9, 0.967])
        # A header has words where numbers would be; one number alone is not a row.
        self.assertNotIn("f32 function, 2^24 elements fn ms base ms", rows)
        self.assertEqual(rows["softmax view"], [1.25, 1.01])

    def test_a_row_needs_a_name(self):
        self.assertEqual(ab.parse_rows("1.0 2.0\n"), {})


class Order(unittest.TestCase):
    def test_each_build_goes_first_in_half_the_rounds(self):
        self.assertEqual(ab.order(4), [(0, 1), (1, 0), (0, 1), (1, 0)])

    def test_one_build_runs_alone(self):
        self.assertEqual(ab.order(3, builds=1), [(0,), (0,), (0,)])


class Summarize(unittest.TestCase):
    def test_medians_ranges_and_ratio(self):
        a = [{"pow": [10.0, 5.0]}, {"pow": [12.0, 5.0]}, {"pow": [11.0, 6.0]}]
        b = [{"pow": [9.0, 5.0]}, {"pow": [8.0, 5.0]}, {"pow": [20.0, 5.0]}]
        s = ab.summarize([a, b])
        row, col, per, ratio = s[0]
        self.assertEqual((row, col), ("pow", 0))
        self.assertEqual(per, [(11.0, 10.0, 12.0), (9.0, 8.0, 20.0)])
        self.assertAlmostEqual(ratio, 9.0 / 11.0)
        self.assertEqual(len(s), 2)

    def test_rows_missing_from_a_run_are_left_out(self):
        a = [{"pow": [1.0, 1.0], "tanh": [2.0, 1.0]}, {"pow": [1.0, 1.0]}]
        b = [{"pow": [1.0, 1.0], "tanh": [2.0, 1.0]}, {"pow": [1.0, 1.0], "tanh": [2.0, 1.0]}]
        rows = {r for r, *_ in ab.summarize([a, b])}
        self.assertEqual(rows, {"pow"})

    def test_columns_some_run_lacks_are_left_out(self):
        a = [{"pow": [1.0, 2.0, 3.0]}, {"pow": [1.0, 2.0]}]
        b = [{"pow": [1.0, 2.0, 3.0]}, {"pow": [1.0, 2.0, 3.0]}]
        cols = [c for _, c, *_ in ab.summarize([a, b])]
        self.assertEqual(cols, [0, 1])

    def test_report_prints_the_chosen_columns(self):
        a = [{"pow": [10.0, 5.0, 2.0]}]
        b = [{"pow": [5.0, 5.0, 1.0]}]
        text = ab.report(["A", "B"], ab.summarize([a, b]), columns=1)
        self.assertEqual(len(text.splitlines()), 2)
        self.assertIn("0.500", text)

    def test_one_build_reports_medians_and_ranges_without_a_ratio(self):
        runs = [{"pow": [10.0, 4.0, 2.5]}, {"pow": [12.0, 4.0, 3.0]}, {"pow": [11.0, 5.0, 2.2]}]
        text = ab.report(["tree"], ab.summarize([runs]), columns=1)
        self.assertEqual(text.splitlines()[1].split()[-2:], ["11", "(10–12)"])
        self.assertNotIn("/", text.splitlines()[0])

    def test_report_prints_every_column_by_default(self):
        a = [{"pow": [10.0, 5.0, 2.0]}]
        b = [{"pow": [5.0, 5.0, 1.0]}]
        text = ab.report(["A", "B"], ab.summarize([a, b]))
        self.assertEqual(len(text.splitlines()), 4)


if __name__ == "__main__":
    unittest.main()
