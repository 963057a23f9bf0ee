"""Tests. A regular package on purpose: diffprivlib 0.6.6 installs a top-level `tests`
package into site-packages, which would shadow a namespace-package tests/ folder."""
