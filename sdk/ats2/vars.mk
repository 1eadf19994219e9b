# What a program needs to build against the ATS2 SDK (included by its
# Makefile and by programs' Makefiles, e.g. examples/http_req/ats2).
SDK := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
SDK_C := $(abspath $(SDK)/../c)
BUILD := $(SDK)/build
PATSCC ?= patscc
ATSFLAGS := -DATS_MEMALLOC_LIBC -D_GNU_SOURCE -O2 -IATS $(SDK) -I $(SDK) -I $(SDK_C)/include
LIBS := $(BUILD)/cumulo_dats.o $(BUILD)/cumulo-c/libcumulo.a -lssl -lcrypto -lpthread
C_SOURCES := $(wildcard $(SDK_C)/src/*.c $(SDK_C)/include/*.h)
SDK_LIB_DEPS := $(SDK)/DATS/cumulo.dats $(SDK)/SATS/cumulo.sats $(SDK)/CATS/cumulo.cats $(C_SOURCES)
