// Does not compile: the runtime must return the compiler's message.
extern "C" int Broken(int nparam, void **params) {
  return this_identifier_does_not_exist_anywhere;
}
