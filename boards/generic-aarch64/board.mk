# Any 64-bit Arm Linux board: baseline Armv8-A. The test build for qemu uses
# it, so one binary runs under both -cpu cortex-a72 and -cpu max.
BOARD_ARCH := aarch64
BOARD_CROSS := aarch64-linux-gnu-
BOARD_CFLAGS := -march=armv8-a
