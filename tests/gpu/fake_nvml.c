/*
 * A stand-in for libnvidia-ml.so.1 with the NVML C API calls jupyter_hyperpod.gpu.local uses, for
 * machines without an NVIDIA driver: the real pynvml (nvidia-ml-py) loads it and calls it through
 * ctypes exactly as it calls the driver's library. Signatures, structs and return codes follow
 * NVIDIA's nvml.h (NVML API Reference Guide):
 *   nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
 *   nvmlReturn_t nvmlShutdown(void);
 *   nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
 *   nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
 *   nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
 *   nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
 *   nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *u);
 *   nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
 *   nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power);  (mW)
 *   nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
 *                                         nvmlTemperatureSensors_t sensorType,
 *                                         unsigned int *temp);                      (C)
 *   const char *nvmlErrorString(nvmlReturn_t result);
 * Every call but init returns NVML_ERROR_UNINITIALIZED before nvmlInit, INVALID_ARGUMENT for a
 * NULL pointer or a bad index or sensor, INSUFFICIENT_SIZE when a buffer is too short, and
 * NOT_SUPPORTED where the device lacks the sensor (here: GPU 1 reports no power draw, as some
 * boards do). fake_nvml_set_utilization() is the test's own hook, not NVML.
 */
#include <stddef.h>
#include <string.h>

typedef enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
} nvmlReturn_t;

typedef enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;

typedef struct {
    unsigned int gpu;    /* percent of time a kernel ran over the last sample period */
    unsigned int memory; /* percent of time memory was read or written */
} nvmlUtilization_t;

typedef struct {
    unsigned long long total; /* bytes */
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

struct nvmlDevice_st {
    const char *name;
    const char *uuid;
    unsigned int gpu_util, mem_util;
    unsigned long long total, used;
    int has_power;
    unsigned int power_mw;
    unsigned int temp_c;
};
typedef struct nvmlDevice_st *nvmlDevice_t;

#define MIB (1024ULL * 1024ULL)

static struct nvmlDevice_st devices[] = {
    {"NVIDIA H100 80GB HBM3", "GPU-5c1e4f8a-8f2b-3b1c-9d3e-4c2a1b0f9e8d", 87, 40, 81559 * MIB,
     40960 * MIB, 1, 612340, 58},
    {"NVIDIA A10G", "GPU-0a1b2c3d-0000-1111-2222-333344445555", 3, 1, 23028 * MIB, 512 * MIB, 0,
     0, 30},
};
static const unsigned int device_count = sizeof(devices) / sizeof(devices[0]);
static int initialized = 0;

static int known(nvmlDevice_t device) {
    for (unsigned int i = 0; i < device_count; i++) {
        if (device == &devices[i]) {
            return 1;
        }
    }
    return 0;
}

static nvmlReturn_t copy(const char *text, char *out, unsigned int length) {
    if (out == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (strlen(text) + 1 > length) {
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    strcpy(out, text);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    initialized += 1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    if (!initialized) {
        return NVML_ERROR_UNINITIALIZED;
    }
    initialized -= 1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialized) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (count == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *count = device_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialized) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (device == NULL || index >= device_count) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    if (!initialized) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (!known(device)) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    return copy(device->name, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    if (!initialized) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (!known(device)) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    return copy(device->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    if (!initialized) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (!known(device) || utilization == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    utilization->gpu = device->gpu_util;
    utilization->memory = device->mem_util;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    if (!initialized) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (!known(device) || memory == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    memory->total = device->total;
    memory->used = device->used;
    memory->free = device->total - device->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
    if (!initialized) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (!known(device) || power == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (!device->has_power) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    *power = device->power_mw;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor,
                                      unsigned int *temp) {
    if (!initialized) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (!known(device) || temp == NULL || sensor != NVML_TEMPERATURE_GPU) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *temp = device->temp_c;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    default:
        return "Unknown Error";
    }
}

/* The test's hook (not NVML): what the GPU reports busy next. */
int fake_nvml_set_utilization(unsigned int index, unsigned int gpu) {
    if (index >= device_count) {
        return -1;
    }
    devices[index].gpu_util = gpu;
    return 0;
}
