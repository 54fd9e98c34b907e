# The machine you build on. Binaries may use every instruction it has
# (-march=native); SIMD kernels are still chosen at run time.
BOARD_ARCH := $(shell uname -m)
BOARD_CROSS :=
BOARD_CFLAGS := -march=native
