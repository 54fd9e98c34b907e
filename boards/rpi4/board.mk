# Raspberry Pi 4: Cortex-A72 (Armv8.0-A, NEON, no dot-product).
BOARD_ARCH := aarch64
BOARD_CROSS := aarch64-linux-gnu-
BOARD_CFLAGS := -mcpu=cortex-a72
