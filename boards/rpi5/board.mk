# Raspberry Pi 5: Cortex-A76 (Armv8.2-A, NEON and dot-product: sdot/udot).
BOARD_ARCH := aarch64
BOARD_CROSS := aarch64-linux-gnu-
BOARD_CFLAGS := -mcpu=cortex-a76
