# Per-file instruction sets for SIMD kernels, by file-name suffix. Kernels are
# chosen at run time from the CPU features in port/, so one binary serves
# every CPU of its architecture. Included by the Makefile and by
# tools/fuzz.sh, each with KOBJ set to its object directory, so the two
# builds cannot disagree.
$(KOBJ)/runtime/kernels/x86/%_avx2.o: KFLAGS = -mavx2 -mfma
$(KOBJ)/runtime/kernels/x86/%_avx512.o: KFLAGS = -mavx2 -mfma -mavx512f -mavx512bw -mavx512vl
$(KOBJ)/runtime/kernels/x86/%_vnni.o: KFLAGS = -mavx2 -mfma -mavx512f -mavx512bw -mavx512vl \
	-mavx512vnni
$(KOBJ)/runtime/kernels/x86/%_amx.o: KFLAGS = -mavx2 -mfma -mavx512f -mavx512bw -mavx512vl \
	-mavx512vnni -mamx-tile -mamx-int8
# Board -mcpu flags would conflict with -march here; the file asks for exactly dotprod.
$(KOBJ)/runtime/kernels/arm/%_dotprod.o: BOARD_CFLAGS = -march=armv8.2-a+dotprod
