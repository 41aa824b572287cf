/*
 * custom_aot_typeid.h -- MindSpore's TypeId values for FuncInferType (a Tritium addition).
 *
 * MindSpore's own samples declare an opaque `enum TypeId : int {};` next to their
 * FuncInferType; include this header instead (not both) to get the named values, which are
 * stable in MindSpore up to kNumberTypeBFloat16.
 */
#ifndef TRITIUM_CUSTOM_AOT_TYPEID_H_
#define TRITIUM_CUSTOM_AOT_TYPEID_H_

enum TypeId : int {
  kTypeUnknown = 0,
  kNumberTypeBool = 30,
  kNumberTypeInt = 31,
  kNumberTypeInt8 = 32,
  kNumberTypeInt16 = 33,
  kNumberTypeInt32 = 34,
  kNumberTypeInt64 = 35,
  kNumberTypeUInt = 36,
  kNumberTypeUInt8 = 37,
  kNumberTypeUInt16 = 38,
  kNumberTypeUInt32 = 39,
  kNumberTypeUInt64 = 40,
  kNumberTypeFloat = 41,
  kNumberTypeFloat16 = 42,
  kNumberTypeFloat32 = 43,
  kNumberTypeFloat64 = 44,
  kNumberTypeBFloat16 = 45,
};

#endif  // TRITIUM_CUSTOM_AOT_TYPEID_H_
