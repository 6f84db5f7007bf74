package dsl

import "reflect"

// Equal reports whether two AST nodes (or whole Files) have the same structure and values,
// ignoring positions (every Span and Pos), comments, and the difference between a nil and an
// empty statement or expression list. It is what "parse(format(x)) equals parse(x)" means.
func Equal(a, b any) bool {
	return equalValue(reflect.ValueOf(a), reflect.ValueOf(b))
}

var (
	posType      = reflect.TypeOf(Pos{})
	spanType     = reflect.TypeOf(Span{})
	commentsType = reflect.TypeOf([]*Comment(nil))
)

func equalValue(a, b reflect.Value) bool {
	if !a.IsValid() || !b.IsValid() {
		return a.IsValid() == b.IsValid()
	}
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return equalValue(a.Elem(), b.Elem())
	case reflect.Struct:
		if a.Type() == posType || a.Type() == spanType {
			return true
		}
		for i := 0; i < a.NumField(); i++ {
			if a.Type().Field(i).Type == commentsType {
				continue
			}
			if !equalValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.Type() == commentsType {
			return true
		}
		if a.Len() != b.Len() {
			return false
		}
		for i := 0; i < a.Len(); i++ {
			if !equalValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float() || a.Float() != a.Float() && b.Float() != b.Float()
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}
