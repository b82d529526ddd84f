; Kestrel's Windows installer: a per-user install with no administrator rights.
;
; Built by scripts/make_installer.py, which passes every fact about this build as a
; define (see include/defines.nsh) and writes the payload list the sections include.
; Each concern lives in its own include, as qutebrowser's and other mature NSIS
; installers do; this file only puts them in order.

Unicode true
ManifestDPIAware true
; Per user: installs under %LOCALAPPDATA%, writes HKCU only, never asks for elevation.
RequestExecutionLevel user

!include "include\defines.nsh"

Name "${APP_NAME}"
OutFile "${OUTFILE}"
InstallDir "$LOCALAPPDATA\Programs\${APP_NAME}"
; An existing install is updated where it is (upgrade.nsh reads the same value).
InstallDirRegKey HKCU "${UNINSTALL_KEY}" "InstallLocation"
BrandingText "${APP_NAME} ${APP_VERSION}"
ShowInstDetails show
ShowUninstDetails show

; Not solid: a component left out is skipped without unpacking it, and the model files
; (quantized weights, which hardly compress) are stored as they are (sections.nsh).
; "none" stores everything: for checking the payload, where compressing only costs minutes.
!if "${COMPRESSOR}" == "none"
  SetCompress off
!else
  SetCompressor ${COMPRESSOR}
!endif

!include "LogicLib.nsh"
!include "FileFunc.nsh"
!include "Sections.nsh"
!include "StrFunc.nsh"
${StrStr}
${UnStrStr}

!include "include\version.nsh"
!include "include\running.nsh"
!include "include\upgrade.nsh"
!include "include\pages.nsh"
!include "include\sections.nsh"
!include "include\uninstaller.nsh"
