"""Tests of python/nnasm.py, the ctypes binding over the C API: loading a file and bytes, the
inputs' and outputs' infos, a run against a numpy reference (float32 and int32 inputs), zero-copy
views, and every misuse raising nnasm.Error with the C API's (or the binding's) message.
Run with Debian's python3 and python3-numpy: /usr/bin/python3 tests/python/test_nnasm.py
(NNASM_LIBRARY names the library to test; default: the repository's build/libnnasm.so)."""

import os
import sys
import tempfile
import unittest

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import nnasm  # noqa: E402

W = np.array([[0.5, -1, 0.25, 2], [1.5, 0.75, -0.5, -2], [1, 0, 0.5, 1]], np.float32)
B = np.array([0.1, -0.2, 0.3, 0], np.float32)
TABLE = np.arange(10, dtype=np.float32).reshape(5, 2) // 2 * 10 + np.tile([0, 1], 5).reshape(5, 2)


def fmt(a):
    return ", ".join(repr(float(v)) for v in a.ravel())


LISTING = f"""input  %x : f32[2,3]
input  %idx : i32[3]
param  @w : f32[3,4] = [{fmt(W)}]
param  @b : f32[4] = [{fmt(B)}]
const  @table : f32[5,2] = [{fmt(TABLE)}]
output %y
output %cls
output %g

forward:
  LINEAR  %x, @w, @b -> %h  act=relu
  SOFTMAX %h -> %y
  ARGMAX  %y -> %cls
  GATHER  @table, %idx -> %g
"""


def reference(x, idx):
    h = np.maximum(x.astype(np.float64) @ W + B, 0)
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    y = e / e.sum(axis=-1, keepdims=True)
    return {"y": y, "cls": y.argmax(axis=-1).astype(np.int32), "g": TABLE[idx]}


class NnasmTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "mlp.nnasm")
        with open(self.path, "w") as f:
            f.write(LISTING)
        self.x = np.array([[1, -2, 0.5], [0.25, 3, -1]], np.float32)
        self.idx = np.array([4, 0, 2], np.int32)

    def tearDown(self):
        self.dir.cleanup()

    def test_set_batch(self):
        # One input with the batch leading: the model runs at any batch; the rows are the
        # reference's. A model whose inputs disagree on the batch says so.
        path = os.path.join(self.dir.name, "one.nnasm")
        with open(path, "w") as f:
            f.write(LISTING.split("input  %idx")[0] + f"param  @w : f32[3,4] = [{fmt(W)}]\n"
                    f"param  @b : f32[4] = [{fmt(B)}]\noutput %y\n\nforward:\n"
                    "  LINEAR  %x, @w, @b -> %h  act=relu\n  SOFTMAX %h -> %y\n")
        x = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
        idx = np.zeros(5, np.int32)
        with nnasm.Model(path, batch=5) as m:
            self.assertEqual(m.inputs[0].shape, (5, 3))
            np.testing.assert_allclose(m.run({"x": x})["y"], reference(x, idx)["y"], rtol=1e-5, atol=1e-6)
            m.set_batch(1)
            self.assertEqual(m.outputs[0].shape, (1, 4))
            np.testing.assert_allclose(m.run({"x": x[2:3]})["y"], reference(x[2:3], idx[:1])["y"], rtol=1e-5,
                                       atol=1e-6)
            with self.assertRaises(nnasm.Error):
                m.set_batch(0)
        with nnasm.Model(self.path) as m:
            with self.assertRaises(nnasm.Error) as e:
                m.set_batch(4)
            self.assertIn("idx", e.exception.message)

    def test_infos(self):
        with nnasm.Model(self.path) as m:
            self.assertEqual(m.inputs, [nnasm.TensorInfo("x", (2, 3), np.dtype(np.float32)),
                                        nnasm.TensorInfo("idx", (3,), np.dtype(np.int32))])
            self.assertEqual([(t.name, t.shape, t.dtype) for t in m.outputs],
                             [("y", (2, 4), np.float32), ("cls", (2,), np.int32), ("g", (3, 2), np.float32)])

    def test_run_matches_numpy(self):
        want = reference(self.x, self.idx)
        with nnasm.Model(self.path, threads=1, isa="ref") as m:
            got = m.run({"x": self.x, "idx": self.idx})
            np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(got["cls"], want["cls"])
            self.assertEqual(got["cls"].dtype, np.int32)
            np.testing.assert_array_equal(got["g"], want["g"])
            # Copies own their data: the next run does not change them.
            y0 = got["y"].copy()
            m.run({"x": -self.x, "idx": self.idx[::-1].copy()})
            np.testing.assert_array_equal(got["y"], y0)

    def test_views_are_valid_until_the_next_run(self):
        with nnasm.Model(self.path) as m:
            v = m.run({"x": self.x, "idx": self.idx}, copy=False)
            self.assertFalse(v["g"].flags.writeable)
            np.testing.assert_array_equal(v["g"], TABLE[self.idx])
            m.run({"x": self.x, "idx": np.array([1, 1, 1], np.int32)})
            np.testing.assert_array_equal(v["g"], TABLE[[1, 1, 1]])

    def test_lists_are_converted(self):
        with nnasm.Model(self.path) as m:
            got = m.run({"x": self.x.tolist(), "idx": [4, 0, 2]})
            np.testing.assert_array_equal(got["g"], TABLE[[4, 0, 2]])

    def test_from_bytes(self):
        with nnasm.Model.from_bytes(LISTING.encode()) as m:
            got = m.run({"x": self.x, "idx": self.idx})
        np.testing.assert_array_equal(got["cls"], reference(self.x, self.idx)["cls"])

    def test_eight_bit_inputs_and_outputs(self):
        listing = ("input %x : u8[4]\nconst @s : f32[] = [0.5]\nconst @z : u8[] = [128]\n"
                   "const @zi : i8[] = [-3]\noutput %yi\noutput %yu\n\nforward:\n"
                   "  DEQUANTIZE %x, @s, @z -> %f\n  QUANTIZE %f, @s, @zi -> %yi\n  QUANTIZE %f, @s, @z -> %yu\n")
        x = np.array([0, 100, 128, 255], np.uint8)
        with nnasm.Model.from_bytes(listing.encode()) as m:
            self.assertEqual(m.inputs, [nnasm.TensorInfo("x", (4,), np.dtype(np.uint8))])
            self.assertEqual([o.dtype for o in m.outputs], [np.dtype(np.int8), np.dtype(np.uint8)])
            got = m.run({"x": x})
            self.assertError(lambda: m.run({"x": x.astype(np.int32)}), 1, "convert it with .astype(np.uint8)")
        np.testing.assert_array_equal(got["yi"], np.array([-128, -31, -3, 124], np.int8))
        np.testing.assert_array_equal(got["yu"], x)

    def assertError(self, fn, status, text):
        with self.assertRaises(nnasm.Error) as c:
            fn()
        self.assertEqual(c.exception.status, status, c.exception.message)
        self.assertIn(text, c.exception.message)
        self.assertIn(text, str(c.exception))

    def test_misuse_raises_with_the_message(self):
        with nnasm.Model(self.path) as m:
            self.assertError(lambda: m.run({"nope": self.x, "idx": self.idx}), 2, "no input named 'nope'")
            self.assertError(lambda: m.run({"x": self.x.astype(np.float64), "idx": self.idx}), 1,
                             "input 'x' is float32, the array is float64")
            self.assertError(lambda: m.run({"x": self.x[:1], "idx": self.idx}), 3,
                             "input 'x' has shape [2, 3], the array [1, 3]")
            self.assertError(lambda: m.run({"x": self.x}), 1, "input not given: idx")
        self.assertError(lambda: m.run({"x": self.x, "idx": self.idx}), 1, "the model is closed")

    def test_bad_files(self):
        missing = os.path.join(self.dir.name, "missing.nnm")
        self.assertError(lambda: nnasm.Model(missing), 5, "missing.nnm")
        bad = os.path.join(self.dir.name, "bad.nnasm")
        with open(bad, "w") as f:
            f.write("input %x : f32[2\n")
        with self.assertRaises(nnasm.Error) as c:
            nnasm.Model(bad)
        self.assertIn("bad.nnasm:1:", c.exception.message)
        self.assertError(lambda: nnasm.Model(self.path, isa="avx3"), 1, "avx3")


if __name__ == "__main__":
    unittest.main()
